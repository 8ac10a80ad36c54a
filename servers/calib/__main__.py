"""`python -m servers.calib --ttft-ms 50 --itl-ms 10 --port 8123` ─► servers.calib.serve.main."""
import sys

from servers.calib.serve import main

if __name__ == "__main__":
    sys.exit(main())
