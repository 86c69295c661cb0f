"""``python -m poimen_memory.cli``."""

import sys

from poimen_memory.cli import main

sys.exit(main())
