"""``python -m paraeval [overrides]``: the ``paraeval`` command."""

from paraeval.pipeline.cli.main import main

if __name__ == "__main__":
    main()
