"""The `analyze` use case, free of argparse and consoles: a typed request in
(`request.AnalyzeRequest`), a typed outcome back (`request.AnalyzeOutcome`), and in between
the stages of the documented data flow, one module each: engine choice (`engine`), planning
(`plan`), the orchestrator's run, filtering (`filters`), and the fixes (`run`)."""
