"""Where metric calls run. Importing loads nothing: ``paraeval-score`` builds without pandas."""
