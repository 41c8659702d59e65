"""Async SQL, one module per aggregate; the only place (with db.py) that holds SQL."""
