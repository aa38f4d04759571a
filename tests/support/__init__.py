"""Helpers shared by the test layers (no tests here)."""
