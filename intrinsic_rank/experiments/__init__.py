"""Reproductions of the papers: pure functions returning records, plus plots."""

from ._sweep import format_table, plot_sweep, rank_sweep, save_records

__all__ = ["format_table", "plot_sweep", "rank_sweep", "save_records"]
