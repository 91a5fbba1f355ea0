"""The one error tree of ge-plugin.

Every error inherits ``GePluginError`` and the nearest built-in, so callers can catch either
(``except ValueError`` keeps working for a bad spec). ACL failures carry the numeric code, its ACL name, the
call that failed and ``acl.get_recent_err_msg()``, because that is what a user pastes into a support ticket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ge_plugin.acl_constants import MEMORY_ERRORS, error_name


class GePluginError(Exception):
    """Base of every error raised by ge-plugin."""


class SpecError(ValueError, GePluginError):
    """A model spec is invalid. ``problems`` holds every problem, each ``file.yaml:LINE: $.path: message``."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ConfigError(ValueError, GePluginError):
    """A config.pbtxt (or its ``parameters``) cannot be served; the message names the key."""


class RenderError(GePluginError):
    """A model repository cannot be written."""


class AtcError(ValueError, GePluginError):
    """ATC flags that ATC itself would reject."""


class GearTextError(ValueError, GePluginError):
    """Text that is not a list of gears (``ge_plugin.gears.parse_values``). ``problem`` names the rule it
    broke (``empty``, ``not_integer``, ``below_one``, ``not_pairs``, ``widths``), with the
    ``item``, ``value`` or ``widths`` at fault, so that ATC's flags, a config's parameters and a command
    line each say it in their own words."""

    def __init__(
        self, problem: str, text: str, *, item: str = "", value: int = 0, widths: tuple[int, ...] = ()
    ):
        self.problem = problem
        self.text = text
        self.item = item
        self.value = value
        self.widths = widths
        super().__init__(f"{problem}: {text!r}")

    def said(self, words: Mapping[str, str], otherwise: str) -> str:
        """This fault in a caller's words: ``words[problem]`` (else ``otherwise``), a format string of
        ``text``, ``item``, ``value`` and the two different ``widths`` ``a`` and ``b``."""
        a, b = (*self.widths, 0, 0)[:2]
        return words.get(self.problem, otherwise).format(
            text=self.text, item=self.item, value=self.value, a=a, b=b
        )


class ModelFileError(ValueError, GePluginError):
    """A file is not a model this runtime can load (for example a real OM given to the simulator)."""


class RequestError(ValueError, GePluginError):
    """One inference request is invalid; its batch-mates still run. The message names the input."""


class ImageError(RequestError):
    """An encoded image in a request that DVPP cannot take (not a JPEG, a kind JPEGD does not decode, cut
    short, too large): its request fails with 400 naming the image and why; its batch-mates still run."""


class TokenizerError(ValueError, GePluginError):
    """A tokenizer's files cannot be read or do not fit the model, or a chat cannot be rendered with its
    template; the message names the file or the message at fault."""


class UnavailableError(RuntimeError, GePluginError):
    """The instance cannot run requests for now (a device failure it is still recovering from); a retry later
    may succeed, so the backend answers UNAVAILABLE (HTTP 503) rather than INTERNAL."""


class ServeError(RuntimeError, GePluginError):
    """tritonserver cannot be prepared or started."""


class Refused(ValueError, GePluginError):
    """A request ge-plugin's front answers itself instead of forwarding it: ``status`` is the HTTP status (a
    gRPC front maps it to its code), the message is what the client reads (it names no server path)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class DemoFailed(RuntimeError, GePluginError):
    """The demo's served answers were wrong."""


class BenchError(RuntimeError, GePluginError):
    """The bench could not run or could not read what it measured."""


class TuneError(RuntimeError, GePluginError):
    """A tuning sweep cannot run, or found nothing that meets its constraints; the message says which."""


class DeployError(ValueError, GePluginError):
    """Deployment objects cannot be rendered from these specs and options; the message says why."""


class MigrateError(ValueError, GePluginError):
    """A CANN GE backend config cannot be migrated to a spec; the message names the key or the file."""


class AclError(RuntimeError, GePluginError):
    """A pyACL call returned a non-zero code.

    pyACL never raises for runtime failures; it returns an int. ``ge_plugin.device.check`` turns that int into
    this exception at the device layer, so nothing above the device layer ever looks at raw codes.
    """

    def __init__(self, code: int, call: str, detail: str = ""):
        self.code = code
        self.name = error_name(code)
        self.call = call
        self.detail = detail
        message = f"{call} failed: {self.name} ({code})"
        if detail:
            message += f": {detail}"
        super().__init__(message)


class AclMemoryError(MemoryError, AclError):
    """An ACL allocation failed (device or pinned host memory exhausted)."""

    def __init__(self, code: int, call: str, detail: str = ""):
        AclError.__init__(self, code, call, detail)


def acl_error(code: int, call: str, detail: str = "") -> AclError:
    """The most specific AclError for ``code``."""
    cls = AclMemoryError if code in MEMORY_ERRORS else AclError
    return cls(code, call, detail)
