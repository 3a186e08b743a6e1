import sys

from flink_runbooks.apps.cli import main

sys.exit(main())
