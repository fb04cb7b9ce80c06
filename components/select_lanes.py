"""KFP wrapper of lanes_of_kind: one kind of a round's lanes, for that kind's loop.

``plan_round`` returns every lane in one list (kfp.local 2.17 cannot loop over one of a
component's several named outputs); on a multi-host preset two of these light tasks part
the one-pod lanes from the multi-host ones.
"""

from typing import List

from kfp import dsl

from batchscale.core.images import LIGHT_IMAGE


@dsl.component(base_image=LIGHT_IMAGE, install_kfp_package=False)
def select_lanes(lanes: List[dict], kind: str) -> List[dict]:
    """The lanes of ``kind`` (``one_pod`` or ``multi_host``; ``search.lanes``)."""
    from batchscale.search.lanes import lanes_of_kind

    return lanes_of_kind(lanes, kind)
