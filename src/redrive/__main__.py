from redrive.cli import main

raise SystemExit(main())
