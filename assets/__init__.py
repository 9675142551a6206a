"""vitviz.assets: the files that ship with vitviz (example pictures, the embedded model, the theme).

In a source checkout this is the repository's assets/ folder; pyproject.toml installs it as ``vitviz.assets``.
Find it with :func:`vitviz.resources.assets`.
"""
