"""The scripted model: a real HTTP server speaking chat and text completions from a script or a
rule (`server`, `stream`, `replies`, `faults`), the same in process (`model`), and
`python -m remora.models.scripted` (`__main__`). Not a language model: the tests' stand-in."""
