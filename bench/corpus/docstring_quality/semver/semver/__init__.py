# Added for Remora's docstring-quality benchmark: upstream's __init__.py imports modules not
# vendored here (cli, _deprecated); only version.py and _types.py are benchmarked.
