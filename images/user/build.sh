#!/bin/sh
# skaffold's custom build of batchscale-user (profiles user, user-gpu, user-tpu): build
# images/user/Dockerfile with YOUR folder ($BATCHSCALE_USER_CODE) as the context, on the
# batchscale image skaffold built first ($BASE, the artifact this one requires), tag it
# $IMAGE and push it when skaffold asks ($PUSH_IMAGE). skaffold runs this in images/user/
# and passes IMAGE, PUSH_IMAGE, BUILD_CONTEXT and BASE (its custom-builder contract) and
# the caller's environment; BATCHSCALE_MODEL=module:function, when set, is checked to
# import in the built image.
set -eu
if [ -z "${BATCHSCALE_USER_CODE:-}" ] || [ ! -d "${BATCHSCALE_USER_CODE}" ]; then
    echo "BATCHSCALE_USER_CODE=${BATCHSCALE_USER_CODE:-} is not a folder; run" \
         "BATCHSCALE_USER_CODE=/path/to/your/code skaffold build -p user ..." >&2
    exit 2
fi
: "${IMAGE:?run by skaffold, which sets IMAGE}" "${BASE:?run by skaffold, which sets BASE}"
docker build \
    --file "${BUILD_CONTEXT:-.}/Dockerfile" \
    --build-arg "BASE=${BASE}" \
    --build-arg "BATCHSCALE_MODEL=${BATCHSCALE_MODEL:-}" \
    --tag "${IMAGE}" \
    "${BATCHSCALE_USER_CODE}"
if [ "${PUSH_IMAGE:-false}" = "true" ]; then
    docker push "${IMAGE}"
fi
