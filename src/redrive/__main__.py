from redrive.signals import hold_stops

hold_stops()  # before the command line's imports: a worker stopped while it starts stops cleanly

from redrive.cli import main

raise SystemExit(main())
