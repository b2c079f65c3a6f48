"""The gbinlog application: click CLI, configuration, runners, metrics."""

__version__ = "0.1.0"
