"""Images in, on the device: the stage in front of a model input whose requests carry encoded images.

The parameter ``preprocess`` (``params.Preprocessing``) names such an input. Its OM input has a static AIPP
(``ge-plugin atc`` compiles one from the spec) and takes YUV420SP NV12 images of one height and width, which
is what DVPP's VPC writes. The stage meets the engine at three narrow places:

- ``Images.admit``, before the planner: each request's images are checked on the host with pyACL's own
  header calls (DVPP's verdict on what it decodes, not a parser of ours), copied out of the request and held
  until the request is answered. The request goes on to the planner with one *ticket* per image in place of
  the bytes (a float32 id, ``[images, 1]``), so the compiled planner batches, pads, joins, splits and re-runs
  images as rows like any other input. A request with an image DVPP cannot take is answered there (400
  naming the image and why); its batch-mates go on.
- ``LaneImages``, made once per lane: the DVPP channel, picture descriptions and memory for a batch of
  images. At launch it reads the tickets the planner staged and queues on the lane's stream, before the
  execute: one H2D copy of the batch's JPEGs into DVPP memory, then per image JPEGD into the lane's decode
  buffer and VPC into that image's row of the model's input, which is DVPP memory the model reads as it is
  (no copy): resized to the input's size (``stretch``), or scaled to fit with its aspect kept and centred
  on black (``letterbox``: the row filled, then VPC's crop-and-paste).
- after the wait (``LaneImages.collect``), an image DVPP failed to decode (a JPEG whose data is damaged)
  fails its request alone, 400 (``Images.refuse``); the stream error that reported it is no device failure.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

import attrs
import numpy as np
import numpy.typing as npt

from ge_plugin import acl_constants as C
from ge_plugin import device, dtypes
from ge_plugin import fastpath as fp
from ge_plugin.device.dvpp import JPEGD_HEIGHT_ALIGN, JPEGD_WIDTH_ALIGN, VPC_SCALE, align_up, decoded_bytes
from ge_plugin.engine.config import IOConfig
from ge_plugin.engine.gear_table import GearTable
from ge_plugin.errors import AclError, ConfigError, ImageError, RequestError
from ge_plugin.params import Preprocessing

if TYPE_CHECKING:  # the lane imports this module for its stage
    from ge_plugin.engine.lane import Answer, Put

#: what the planner sees of the image input: one float32 id per image (ids are exact up to 2**24)
TICKET_TYPE = "fp32"
_MAX_ID = (1 << 24) - 1
#: where each image's JPEG starts in the lane's staging and DVPP memory
_SLOT_ALIGN = 128
_JPEG_START = b"\xff\xd8"
_SCAN_START = b"\xff\xda"
_JPEG_END = b"\xff\xd9"
#: what an image that is no JPEG often is, by its first bytes
_OTHER_FORMATS = ((b"\x89PNG", "a PNG"), (b"GIF8", "a GIF"), (b"BM", "a BMP"), (b"RIFF", "a WebP"))


@attrs.frozen
class ImageInput:
    """The OM's image input: what DVPP writes into it, per row, and how many rows it has."""

    name: str
    #: its index among the OM's inputs
    om_index: int
    height: int
    width: int
    #: one NV12 image, the input's rows apart
    row_bytes: int
    max_rows: int
    prep: Preprocessing

    @classmethod
    def of(cls, prep: Preprocessing, model: device.OmModel, where: str) -> ImageInput:
        """The OM's input ``prep.input``; ConfigError unless it has a static AIPP taking NV12 images of a size
        VPC writes."""
        info = next((i for i in model.inputs if i.name == prep.input), None)
        if info is None:
            raise ConfigError(
                f"{where}: parameters.preprocess names input {prep.input!r}, which the OM does not have "
                f"(its inputs: {', '.join(i.name for i in model.inputs)})"
            )
        dims = info.dims
        if not info.aipp or info.acl_dtype != C.ACL_UINT8 or len(dims) != 4 or dims[3] != 3:
            raise ConfigError(
                f"{where}: input {prep.input!r} takes images (parameters.preprocess), but the OM's input is "
                f"{dtypes.by_acl(info.acl_dtype).short} {list(dims)} without a static AIPP; build the OM with the "
                "spec's preprocess (ge-plugin atc writes the AIPP config) or ATC's --insert_op_conf"
            )
        height, width = dims[1], dims[2]
        row_bytes = height * width * 3 // 2
        if height <= 0 or width <= 0 or info.size % row_bytes:
            raise ConfigError(
                f"{where}: input {prep.input!r}: the OM's AIPP input {list(dims)} of {info.size} bytes is not "
                "YUV420SP images of one fixed size"
            )
        if width % 16 or height % 2:
            raise ConfigError(
                f"{where}: input {prep.input!r} takes {height}x{width} images; VPC writes rows whose width is a "
                "multiple of 16 and height even"
            )
        return cls(prep.input, info.index, height, width, row_bytes, info.size // row_bytes, prep)

    def ticket_info(self, info: device.TensorInfo) -> device.TensorInfo:
        """What the planner binds in place of the OM's input: a ticket per row."""
        return attrs.evolve(
            info, dims=(info.dims[0], 1), acl_dtype=dtypes.by_name(TICKET_TYPE).acl, size=self.max_rows * 4
        )

    def ticket_io(self, io: IOConfig, batched: bool) -> IOConfig:
        """What the planner validates: a ticket per image (unbatched: the OM's whole batch)."""
        return IOConfig(io.name, dtypes.by_name(TICKET_TYPE), (1,) if batched else (self.max_rows, 1))

    def planned(self, table: GearTable, position: int) -> GearTable:
        """The gear table with the image input's dims as the planner sees them: (rows, 1) tickets."""
        gears = []
        for gear in table.gears:
            dims = list(gear.input_dims)
            dims[position] = (dims[position][0], 1)
            gears.append(attrs.evolve(gear, input_dims=tuple(dims)))
        return GearTable(gears, mode=table.mode)


@attrs.frozen
class HeldImage:
    """One admitted image: its JPEG, its size (JPEGD's output strides cover it), what JPEGD writes of it (even
    sides for NV12) and where VPC puts that in the model's row (left, top, width, height: the whole row when
    stretched)."""

    data: bytes
    size: tuple[int, int]
    width: int
    height: int
    place: tuple[int, int, int, int]


@attrs.define
class Admitted:
    """``admit``'s answer: the requests the planner gets (tickets in place of images), what each asks for, the
    ``put`` that answers them (by their place in the window given to admit) and how many it refused."""

    requests: list[Mapping[str, object]]
    requested: list[Collection[str] | None] | None
    put: Put
    refused: int


class Images:
    """One engine's image input: the images admitted and held until their requests are answered, by ticket
    id. ``input`` is known once the first lane has loaded the OM (``bind``)."""

    def __init__(self, prep: Preprocessing, *, batched: bool):
        self.prep = prep
        self.batched = batched
        self.input: ImageInput | None = None
        #: ticket id -> its image, from admit until its request is answered
        self.held: dict[int, HeldImage] = {}
        self._ids = itertools.cycle(range(1, _MAX_ID + 1))

    def bind(self, model: device.OmModel, where: str) -> ImageInput:
        """The OM's image input, read from the first lane's model and checked against every other lane's."""
        found = ImageInput.of(self.prep, model, where)
        if self.input is None:
            self.input = found
        elif found != self.input:
            raise ConfigError(
                f"{where}: the OM's image input differs between loads ({found} vs {self.input})"
            )
        return found

    @property
    def bound(self) -> ImageInput:
        if self.input is None:
            raise ConfigError("the image input is not bound: no lane has loaded the OM")
        return self.input

    # -- admitting -------------------------------------------------------------------------------------

    def admit(
        self,
        requests: Sequence[Mapping[str, object]],
        requested: Sequence[Collection[str] | None] | None,
        put: Put,
    ) -> Admitted:
        """Check and hold each request's images; answer the requests with an image DVPP cannot take (through
        ``put``), and hand back the others with tickets in their place."""
        image_input = self.bound
        name = image_input.name
        kept: list[Mapping[str, object]] = []
        wanted: list[Collection[str] | None] = []
        origin: list[int] = []
        tickets: list[list[int]] = []
        refused = 0
        for index, request in enumerate(requests):
            try:
                held = [self._check(image_input, n, data) for n, data in enumerate(self._images(request))]
            except RequestError as exc:
                exc.__traceback__ = None
                put(index, exc)
                refused += 1
                continue
            ids = [self._hold(image) for image in held]
            shape = (len(ids), 1) if self.batched else (image_input.max_rows, 1)
            kept.append({**request, name: np.asarray(ids, dtype=np.float32).reshape(shape)})
            wanted.append(None if requested is None or index >= len(requested) else requested[index])
            origin.append(index)
            tickets.append(ids)
        held_images = self.held

        def answer(member: int, outcome: Answer) -> None:
            for ticket in tickets[member]:
                held_images.pop(ticket, None)
            put(origin[member], outcome)

        return Admitted(kept, None if requested is None else wanted, answer, refused)

    def _hold(self, image: HeldImage) -> int:
        held = self.held
        for ticket in self._ids:
            if ticket not in held:
                held[ticket] = image
                return ticket
        raise AssertionError("unreachable: the id cycle never ends")

    def _images(self, request: Mapping[str, object]) -> list[bytes]:
        """The request's encoded images, one ``bytes`` each, in the form the input takes."""
        image_input = self.bound
        name, prep = image_input.name, image_input.prep
        value = request.get(name)
        if value is None:
            raise RequestError(f"input {name!r} is missing: send the encoded images in it")
        array = np.asarray(value)
        expected_rank = 2 if self.batched else 1
        if prep.request == "uint8":
            if array.dtype != np.uint8 or array.ndim != expected_rank:
                form = "[images, bytes]" if self.batched else "[bytes]"
                raise RequestError(
                    f"input {name!r} takes each image's bytes as UINT8 {form}, got {array.dtype} {list(array.shape)}"
                )
            images = [row.tobytes() for row in array] if self.batched else [array.tobytes()]
        else:
            if array.dtype != object or array.ndim != expected_rank or (array.size and array.shape[-1] != 1):
                form = "[images, 1]" if self.batched else "[1]"
                raise RequestError(
                    f"input {name!r} takes one image per BYTES element, {form}, got {array.dtype} {list(array.shape)}"
                )
            images = []
            for n, item in enumerate(array.reshape(-1)):
                if not isinstance(item, (bytes, bytearray, memoryview, np.bytes_)):
                    raise RequestError(f"input {name!r} image {n} is {type(item).__name__}, not bytes")
                images.append(bytes(item))
        if not images:
            raise RequestError(f"input {name!r} holds no image")
        limit = image_input.max_rows
        if self.batched and len(images) > limit:
            raise RequestError(
                f"input {name!r} holds {len(images)} images; the model takes at most {limit} at once"
            )
        if not self.batched and len(images) != limit:
            raise RequestError(f"input {name!r} holds {len(images)} images; the model takes exactly {limit}")
        return images

    def _check(self, image_input: ImageInput, n: int, data: bytes) -> HeldImage:
        """One image as DVPP will take it, or ImageError naming it and why not."""
        prep = image_input.prep
        what = f"input {image_input.name!r} image {n}"
        if not data:
            raise ImageError(f"{what} is empty (0 bytes)")
        if len(data) > prep.max_bytes:
            raise ImageError(
                f"{what} is {len(data)} bytes, more than the model takes ({prep.max_bytes}: max_bytes)"
            )
        if not data.startswith(_JPEG_START):
            kind = next((name for magic, name in _OTHER_FORMATS if data.startswith(magic)), None)
            start = data[:4].hex()
            raise ImageError(
                f"{what} is not a JPEG: it starts with {start}, not the JPEG start marker ffd8"
                + (f" (it looks like {kind}; this model takes JPEGs)" if kind else "")
            )
        try:
            info = device.dvpp.jpeg_info(data)
        except ImageError as exc:
            raise ImageError(f"{what}: {exc}") from None
        width, height = info.width, info.height
        if max(width, height) > prep.max_side:
            raise ImageError(
                f"{what} is {width}x{height}, larger than the model takes ({prep.max_side} a side: max_side)"
            )
        scan = data.find(_SCAN_START)
        if scan < 0 or data.rfind(_JPEG_END) < scan:
            raise ImageError(f"{what} is cut short: no end-of-image marker (ffd9) after its scan")
        size = (width, height)
        width, height = width & ~1, height & ~1  # JPEGD writes NV12 with even sides
        place = self._place(what, width, height, image_input)
        return HeldImage(data, size, width, height, place)

    def _place(
        self, what: str, width: int, height: int, image_input: ImageInput
    ) -> tuple[int, int, int, int]:
        """Where VPC puts a ``width`` x ``height`` picture in the model's row; ImageError beyond VPC's scales."""
        rows, cols = image_input.height, image_input.width
        if image_input.prep.resize == "stretch":
            left, top, w, h = 0, 0, cols, rows
        else:
            scale = min(cols / width, rows / height)
            w = max(16, min(cols, int(width * scale)) & ~1)
            h = max(6, min(rows, int(height * scale)) & ~1)
            left, top = (cols - w) // 2 // 16 * 16, (rows - h) // 2 & ~1
        low, high = VPC_SCALE
        if not (low <= w / width <= high and low <= h / height <= high):
            raise ImageError(
                f"{what} is {width}x{height}: VPC scales a side by 1/32 to 16, and {w}x{h} is outside that"
            )
        return left, top, w, h

    # -- answering -------------------------------------------------------------------------------------

    def refuse(self, stage: LaneImages, chunk: fp.Chunk, position: int, answers: list[Answer]) -> int:
        """Fail each request of ``chunk`` that brought an image DVPP failed on (``stage.failed``, by row) with
        ImageError, in ``answers`` (by its place in the chunk); how many failed. ``position`` is the image
        input's among the planner's inputs."""
        refused = 0
        row = 0
        name = self.bound.name
        for member, shapes in enumerate(chunk.shapes):
            rows = shapes[position][0]
            bad = next((r for r in range(row, row + rows) if r in stage.failed), None)
            if bad is not None:
                answers[member] = ImageError(f"input {name!r} image {bad - row}: {stage.failed[bad]}")
                refused += 1
            row += rows
        return refused


class _Closes(Protocol):
    def close(self) -> None: ...


_Part = TypeVar("_Part", bound=_Closes)


class LaneImages:
    """One lane's DVPP stage: a channel, picture descriptions and DVPP memory for a batch of images, made once
    (``target`` is the lane's model input, DVPP memory, which VPC writes row by row)."""

    def __init__(self, images: Images, image_input: ImageInput, target: device.dvpp.DvppBuffer):
        self.images = images
        self.input = image_input
        self.target = target
        prep = image_input.prep
        rows = image_input.max_rows
        self.slot = align_up(prep.max_bytes, _SLOT_ALIGN)
        self._parts: list[_Closes] = []
        #: rows launched last, and why DVPP failed on some of them (after ``collect``)
        self.launched: list[int] = []
        self.failed: dict[int, str] = {}
        try:
            self.channel = self._keep(device.dvpp.Channel())
            self.config = self._keep(device.dvpp.ResizeConfig())
            self.staging = self._keep(device.PinnedBuffer(rows * self.slot))
            self.encoded = self._keep(device.dvpp.DvppBuffer(rows * self.slot))
            self.decoded = self._keep(device.dvpp.DvppBuffer(decoded_bytes(prep.max_side, prep.max_side)))
            self.sources = [self._keep(device.dvpp.Picture()) for _ in range(rows)]
            self.targets = [self._keep(device.dvpp.Picture()) for _ in range(rows)]
            w, h = image_input.width, image_input.height
            for row, picture in enumerate(self.targets):
                picture.describe(target.ptr + row * image_input.row_bytes, image_input.row_bytes, w, h, w, h)
            letterbox = prep.resize == "letterbox"
            self.crops = [self._keep(device.dvpp.Area()) for _ in range(rows if letterbox else 0)]
            self.pastes = [self._keep(device.dvpp.Area()) for _ in range(rows if letterbox else 0)]
        except BaseException:
            self.close()
            raise

    def _keep(self, part: _Part) -> _Part:
        self._parts.append(part)
        return part

    @property
    def device_bytes(self) -> int:
        return self.encoded.size + self.decoded.size

    @property
    def pinned_bytes(self) -> int:
        return self.staging.size

    def launch(self, tickets: npt.NDArray[np.uint8], nbytes: int, stream_handle: int) -> None:
        """Queue the DVPP work of the staged tickets (``nbytes`` of them, one float32 per row) on the stream:
        rows whose ticket holds no image (padding) are left as they are."""
        held = self.images.held
        staging = self.staging.array
        ids = tickets[:nbytes].view(np.float32)
        work: list[tuple[int, int, HeldImage]] = []
        end = 0
        for row, value in enumerate(ids.tolist()):
            image = held.get(int(value)) if value >= 1 else None
            if image is None:
                continue
            at = align_up(end, _SLOT_ALIGN)
            size = len(image.data)
            staging[at : at + size] = np.frombuffer(image.data, dtype=np.uint8)
            work.append((row, at, image))
            end = at + size
        self.launched = [row for row, _, _ in work]
        self.failed = {}
        if not work:
            return
        encoded = self.encoded
        device.copy_async(
            encoded.ptr, encoded.size, self.staging.ptr, end, C.ACL_MEMCPY_HOST_TO_DEVICE, stream_handle
        )
        decoded = self.decoded.ptr
        image_input = self.input
        for row, at, image in work:
            source = self.sources[row]
            w, h = image.width, image.height
            stride_w = align_up(image.size[0], JPEGD_WIDTH_ALIGN)  # JPEGD's strides cover the whole JPEG
            stride_h = align_up(image.size[1], JPEGD_HEIGHT_ALIGN)
            source.describe(decoded, decoded_bytes(*image.size), w, h, stride_w, stride_h)
            device.dvpp.decode_jpeg_async(
                self.channel, encoded.ptr + at, len(image.data), source, stream_handle
            )
            target = self.targets[row]
            if not self.crops:
                device.dvpp.resize_async(self.channel, source, target, self.config, stream_handle)
                continue
            left, top, pw, ph = image.place
            base = self.target.ptr + row * image_input.row_bytes
            luma = image_input.width * image_input.height
            device.dvpp.fill_async(base, luma, 0, stream_handle)  # black: Y 0, U and V 128 (full range)
            device.dvpp.fill_async(base + luma, luma // 2, 128, stream_handle)
            self.crops[row].set(0, w - 1, 0, h - 1)
            self.pastes[row].set(left, left + pw - 1, top, top + ph - 1)
            device.dvpp.crop_and_paste_async(
                self.channel, source, target, self.crops[row], self.pastes[row], stream_handle
            )

    def collect(self, error: AclError | None) -> None:
        """After the stream's synchronize (``error``: what it raised): which launched rows DVPP failed to
        decode, by their pictures' ret codes. ``error`` is raised again unless those failures explain it."""
        failed = {}
        for row in self.launched:
            code = self.sources[row].ret_code()
            if code:
                why = "its data is damaged" if code == C.ACL_ERROR_FAILURE else "DVPP refused it as it ran"
                failed[row] = f"DVPP's JPEGD could not decode it ({C.error_name(code)} {code}): {why}"
        self.failed = failed
        self.launched = []
        if error is not None and not failed:
            raise error

    def close(self) -> None:
        """Free in reverse order of making; every part is freed even if one fails, the first failure raised."""
        errors: list[BaseException] = []
        for part in reversed(self._parts):
            try:
                part.close()
            except BaseException as exc:  # keep freeing; report the first failure
                errors.append(exc)
        self._parts = []
        if errors:
            raise errors[0]
