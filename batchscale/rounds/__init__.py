"""The paper's protocol, automated: search rounds planned from what the store holds."""
