"""The gbinlog application: click CLI, configuration, runners, metrics."""

__version__ = "0.2.0"
