"""Write data/snapshots/sample/: the text a 12-broker, 3-rack Kafka 2.8 cluster's tools print (the cluster
and what it holds: sparkkafka/tools/snapshot.py).

Deterministic (seeded): run `python data/snapshots/make_sample.py` to regenerate the same files.
Files: topics-describe.txt (kafka-topics --describe, 2.8/3.x form with TopicId), log-dirs.txt
(kafka-log-dirs --describe), racks.txt, server.properties, rates.csv.
"""

from __future__ import annotations

from pathlib import Path

from sparkkafka.tools import snapshot


def main(out: Path = Path(__file__).parent / "sample") -> None:
    snapshot.write(out)


if __name__ == "__main__":
    main()
