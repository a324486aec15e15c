"""``python -m paraeval [overrides]``: the ``paraeval`` command."""

from paraeval.pipeline.__main__ import main

if __name__ == "__main__":
    main()
