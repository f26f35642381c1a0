"""Helpers shared by several test modules: import them as ``from tests.helpers.<module> import ...``."""
