"""Reporters: turn CheckResults into text (rich), JSON, SARIF."""
