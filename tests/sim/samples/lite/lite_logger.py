"""Logging the lite way: every message goes to the CANN application log through acl.app_log, prefixed with
the caller's file, line and function, and to the Python logger "lite"."""

import logging
import sys

import acl
import lite_constants as const

logger = logging.getLogger("lite")


def _log(level, py_level, label, parts):
    text = "".join(str(part) for part in parts)
    logger.log(py_level, text)
    caller = sys._getframe(2)
    where = f"{caller.f_code.co_filename}:{caller.f_lineno} {caller.f_code.co_name}"
    acl.app_log(level, f"[{where}][{label}] {text}")


def log_error(*parts):
    _log(const.LOG_ERROR, logging.ERROR, "ERROR", parts)


def log_warning(*parts):
    _log(const.LOG_WARNING, logging.WARNING, "WARNING", parts)


def log_info(*parts):
    _log(const.LOG_INFO, logging.INFO, "INFO", parts)


def log_debug(*parts):
    _log(const.LOG_DEBUG, logging.DEBUG, "DEBUG", parts)
