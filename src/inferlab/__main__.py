from inferlab.cli import main

raise SystemExit(main())
