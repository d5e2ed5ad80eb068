"""``python -m rewardlab.cli``."""

import sys

from rewardlab.cli.main import main

sys.exit(main())
