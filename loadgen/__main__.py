"""``python -m loadgen`` and the ``loadgen`` console script: ``entry`` imports the CLI inside a
guard, so a Ctrl-C that lands while modules are still importing ends with the interrupted exit
code (130) and one line, never a traceback."""
import sys


def entry() -> int:
    try:
        from loadgen.cli import main
        return main()
    except KeyboardInterrupt:
        print("loadgen: error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(entry())
