"""spark-submit entry point: ``spark-submit [--master ...] pipeline/jobs/run.py run --data-dir D --out O``."""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main())
