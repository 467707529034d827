"""Placeholder: decision tests added by the mutation work of session 6."""
