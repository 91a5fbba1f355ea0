"""A stand-in for the generating LLaMA, written for the front's tests: Contract B's interface exactly
(docs/generate.md), deterministic tokens, no device.

Greedy (no temperature or 0): it answers "Echo: <the prompt's text>" in the tokenizer's ids, then EOS
(unless ``ignore_eos``: then the answer again, until ``max_tokens``). With a temperature: random ids in
[3, vocab) from a generator seeded with ``seed`` (a sampling model writes invalid UTF-8 as readily as valid).
Each request has a thread of its own; ``slots`` of them at most (beyond: UNAVAILABLE); a prompt longer than
``context`` ids fails INVALID_ARG naming the limit; ``delay_ms`` between tokens; every request's end is
appended to ``events.log`` in the model's folder (``<request id or count> <finish_reason> <completion>``),
so a test can see that a client's disconnect cancelled its generation.
"""

import json
import os
import pathlib
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

from ge_plugin.text.files import tokenizer_paths
from ge_plugin.text.tokenizer import Tokenizer


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        self.model_dir = args["model_repository"]
        folder = pathlib.Path(self.model_dir)
        # a model whose config names no tokenizer still writes text with the demo's (beside it, as render puts it)
        paths = tokenizer_paths(params, folder) or (
            folder / "tokenizer.json",
            folder / "tokenizer_config.json",
        )
        self.tokenizer = Tokenizer.from_files(*paths)
        self.vocab = int(params.get("vocab_size", "512"))
        self.tokenizer.check_vocab(self.vocab, config["name"])  # the load fails on a mismatch
        self.slots = int(params.get("slots", "64"))
        self.context = int(params.get("context", "512"))
        self.delay = float(params.get("delay_ms", "1")) / 1000
        self.per_response = int(params.get("tokens_per_response", "1"))
        self.lock = threading.Lock()
        self.active = 0
        self.count = 0

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            with self.lock:
                busy = self.active >= self.slots
                if not busy:
                    self.active += 1
                    self.count += 1
                    number = self.count
            if busy:
                error = pb_utils.TritonError(
                    "every slot is busy and the queue is full", pb_utils.TritonError.UNAVAILABLE
                )
                sender.send(
                    pb_utils.InferenceResponse(error=error),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            threading.Thread(target=self._generate, args=(request, sender, number), daemon=True).start()
        return None

    def _generate(self, request, sender, number):
        finish, done = "error", 0
        try:
            finish, done = self._run(request, sender)
        finally:
            with self.lock:
                self.active -= 1
            with open(os.path.join(self.model_dir, "events.log"), "a") as log:
                log.write(f"{request.request_id() or number} {finish} {done}\n")

    def _run(self, request, sender):
        def value(name, default):
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            return tensor.as_numpy().reshape(-1) if tensor is not None else default

        ids = value("input_ids", np.zeros(0, np.int64)).astype(np.int64)
        if len(ids) > self.context:
            error = pb_utils.TritonError(
                f"the prompt has {len(ids)} tokens, more than the context of {self.context}",
                pb_utils.TritonError.INVALID_ARG,
            )
            sender.send(
                pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
            return "invalid", 0
        max_tokens = int(value("max_tokens", [64])[0])
        temperature = float(value("temperature", [0.0])[0])
        seed = value("seed", None)
        ignore_eos = bool(value("ignore_eos", [False])[0])
        stop_ids = {int(i) for i in value("stop_ids", [])}
        stream = bool(value("stream", [False])[0])
        eos = self.tokenizer.special.eos_id
        if temperature > 0:
            rng = np.random.default_rng(int(seed[0]) if seed is not None else None)
            answer = [int(i) for i in rng.integers(3, self.vocab, max_tokens)]
        else:
            text = "Echo: " + self.tokenizer.decode([int(i) for i in ids])
            answer = [*self.tokenizer.backend.encode(text, add_special_tokens=False).ids, eos]
        out, pending, finish = [], [], "length"
        for step in range(max_tokens):
            if sender.is_cancelled():
                finish = "cancelled"
                break
            token = answer[step % len(answer)]
            out.append(token)
            pending.append(token)
            if (token == eos and not ignore_eos) or token in stop_ids:
                finish = "stop"
                break
            if stream and len(pending) >= self.per_response:
                sender.send(self._response(pending, "", len(ids), len(out)))
                pending = []
            time.sleep(self.delay)
        if not stream:
            pending = out
        sender.send(
            self._response(pending, finish, len(ids), len(out)),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )
        return finish, len(out)

    @staticmethod
    def _response(ids, finish, prompt, completion):
        return pb_utils.InferenceResponse(
            [
                pb_utils.Tensor("output_ids", np.array(ids, np.int64)),
                pb_utils.Tensor("finish_reason", np.array([finish.encode()], np.object_)),
                pb_utils.Tensor("prompt_tokens", np.array([prompt], np.int32)),
                pb_utils.Tensor("completion_tokens", np.array([completion], np.int32)),
            ]
        )
