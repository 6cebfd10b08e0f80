"""What a job produces, as data: `JobResult`, `Finding`, `Change` (`results`), the fingerprints
that follow a finding when code moves (`fingerprint`) and `# remora: ignore[...]`
(`suppressions`). It imports only `discovery` (what a node is) and `errors`."""
