"""The job client: result renderers shared by the embedded commands and ``upsertmat client``,
and the gateway's HTTP client."""
