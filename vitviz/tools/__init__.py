"""Tools on top of the views: a view as files and back (bundles), and the ``vitviz`` command."""
