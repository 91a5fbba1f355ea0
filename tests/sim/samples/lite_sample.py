"""A classification-style pyACL program built on lite helpers (lite/), in the style of the public samples that
use Huawei's acllite: a resource object, a model object that owns its buffers, log lines through
acl.app_log. Nothing here knows about ge-plugin; on an Ascend host it runs on the real ``acl``. Usage:
    python lite_sample.py MODEL.om INPUT.npy EXPECTED.npy [LOAD_TYPE]
INPUT holds the largest batch; every batch gear of the model runs on its first rows, synchronously and on
the stream, and must give the first rows of EXPECTED.
"""

import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lite"))

import numpy as np
from lite_logger import log_info
from lite_model import LiteModel
from lite_resource import LiteResource


def main(model_path, input_path, expected_path, load_type):
    resource = LiteResource()
    resource.init()
    try:
        model = LiteModel(model_path, load_type)
        x, expected = np.load(input_path), np.load(expected_path)
        runs = 0
        for batch in model.batches or [x.shape[0]]:
            for result in (model.execute([x[:batch]]), model.execute_async([x[:batch]], resource.stream)):
                (y,) = result
                if y.shape != expected[:batch].shape or not np.allclose(
                    y, expected[:batch], rtol=1e-6, atol=1e-6
                ):
                    raise SystemExit(f"batch {batch}: wrong result {y.shape}")
                runs += 1
            log_info("batch ", batch, " OK")
        model.destroy()
    finally:
        resource.release()
    print(f"lite sample OK: {runs} runs over batches {model.batches}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
