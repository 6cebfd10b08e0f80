"""Discovery: find the Python files to analyse and split them into nodes (`discover`), with
the nodes themselves in `nodes`, the walk in `walk` and the parsing in `parse`."""
