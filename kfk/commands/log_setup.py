"""How a broker process logs: where (stderr, and the file of kfk's own `log.file` key, rotated by size) and in which
form (rich on a terminal, one plain line per record otherwise, or one JSON object per line for log shippers)."""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
from enum import Enum

LEVELS = ("debug", "info", "warning", "error")
PLAIN_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"


class LogFormat(str, Enum):
    text = "text"
    json = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per record and line: time (ISO 8601, UTC), level, logger, message, and the exception's
    traceback as one string when there is one, so that a record never spans lines."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - stdlib's
        from datetime import datetime, timezone

        return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds")


def _formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format is LogFormat.json else logging.Formatter(PLAIN_FORMAT)


def configure_logging(level: str, log_format: LogFormat = LogFormat.text, log_file: str | None = None,
                      max_bytes: int = 0, backups: int = 0) -> None:
    """Send the broker's records to stderr (rich only on a terminal in text form) and, with `log_file`, also to that
    file, rotated at `max_bytes` keeping `backups` copies. Raises OSError when the file cannot be opened."""
    if log_format is LogFormat.text and sys.stderr.isatty():
        from rich.logging import RichHandler

        console_handler: logging.Handler = RichHandler(show_path=False, rich_tracebacks=True)
        console_handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    else:
        console_handler = logging.StreamHandler()
        console_handler.setFormatter(_formatter(log_format))
    handlers = [console_handler]
    if log_file is not None:
        file_handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=max_bytes, backupCount=backups,
                                                            encoding="utf-8")
        file_handler.setFormatter(_formatter(log_format))
        handlers.append(file_handler)
    logging.basicConfig(level=level.upper(), handlers=handlers, force=True)
