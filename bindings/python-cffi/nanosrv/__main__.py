"""`python3 -m nanosrv MODULE:APP [flags]`: see nanosrv.server."""
import sys

from .server import main

sys.exit(main())
