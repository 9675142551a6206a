"""``python -m vitviz.app [--port N]``: serve the web app."""

from vitviz.app import main

main()
