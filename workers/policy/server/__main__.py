from workers.policy.server.cli import main

raise SystemExit(main())
