"""``python -m bucketcore``: the same as the ``bucketcore`` command."""

from __future__ import annotations

from bucketcore.cli import main

raise SystemExit(main())
