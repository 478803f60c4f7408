"""`python -m dlbench` runs the command-line interface."""

from dlbench.cli import main

if __name__ == "__main__":
    main()
