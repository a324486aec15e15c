"""Where the score stage's metric calls run: ``engine=local`` (this process) or ``engine=ray`` (a
Ray cluster through Ray Data). Importing the package loads nothing: ``paraeval-score`` builds
metrics (:mod:`.build`) without pandas."""
