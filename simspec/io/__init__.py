"""File output: one atomic writer for every file simspec writes."""

from simspec.io.atomic import file_mode, results_json, write_atomic

__all__ = ["file_mode", "results_json", "write_atomic"]
