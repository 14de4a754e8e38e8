"""`surfer mcp`: surfer as a Model Context Protocol server (extra `mcp`).

- `command.py` — the command and its options (imports no `mcp` until it runs);
- `server.py` — the tools and resources on the SDK's `MCPServer`, stdio and HTTP;
- `arguments.py` — the tools' arguments and their descriptions;
- `serve.py` — serving over stdio or HTTP, signals; `stdin_relay.py` — stdin a signal can end;
  `stdout_relay.py` — stdout a client that stopped reading cannot wedge;
- `runs.py` — the runs the server holds: start, progress, status, cancel;
- `suites.py` — `run_suite`, surfer's QA runner on a suite file;
- `http_auth.py` — the bearer token of the HTTP transport."""
