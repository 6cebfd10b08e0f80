"""A live view of the event stream (docs/EVENTS.md): progress, throughput, latency, errors.

`state.DashboardState` folds event dicts into numbers and knows nothing of terminals, so tests
can check the numbers exactly; `view.render` turns a `Snapshot` into rich renderables and keeps
it live. The stream comes from a file another process is appending to
(`followers.EventFileFollower`, tail -f), a pipe (`followers.StreamFollower`) or, with
`remora analyze --dashboard`, from the run's own `Events.listeners`.
"""
