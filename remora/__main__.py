from remora.cli import main

raise SystemExit(main())
