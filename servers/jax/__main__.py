"""`python -m servers.jax --preset tiny --port 8123` ─► servers.jax.serve.main."""
import sys

from servers.jax.serve import main

if __name__ == "__main__":
    sys.exit(main())
