"""``pipelines.compiled_yaml.load_documents``, the one reader of compiled pipeline YAML: the
documents ``yaml.safe_load_all`` gives (libyaml's loader where PyYAML has it), and as safe."""

import pytest
import yaml

from batchscale.pipelines.compiled_yaml import load_documents

TEXT = """# PIPELINE DEFINITION
# Name: p
components:
  comp-a:
    executorLabel: exec-a
    inputs: {parameters: {n: {defaultValue: 3, parameterType: NUMBER_INTEGER}}}
deploymentSpec:
  executors:
    exec-a:
      container:
        args: [--executor_input, "{{$}}", "line one\\n  line two \\"quoted\\"\\n"]
        env: [{name: X, value: '1.50'}]
root: {dag: {tasks: {}}, inputDefinitions: {parameters: {s: {defaultValue: {a: [1, 2.0, null, true]}}}}}
---
platforms:
  kubernetes:
    deploymentSpec: {executors: {exec-a: {activeDeadlineSeconds: '600'}}}
"""


def test_load_documents_reads_what_safe_load_all_reads():
    docs = load_documents(TEXT)
    assert docs == list(yaml.safe_load_all(TEXT)) and len(docs) == 2
    default = docs[0]["root"]["inputDefinitions"]["parameters"]["s"]["defaultValue"]
    assert default == {"a": [1, 2.0, None, True]} and type(default["a"][0]) is int


def test_load_documents_constructs_no_python_objects():
    with pytest.raises(yaml.constructor.ConstructorError):
        load_documents("!!python/object/apply:os.getcwd []")
