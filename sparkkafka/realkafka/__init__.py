"""Real Apache Kafka beside the emulator: a ZooKeeper and brokers as local JVM processes (cluster.py), their
classpath from Maven (jars.py), a scenario's timeline on the wall clock (timeline.py), samples of each
partition's leader, epoch and ISR (observe.py) and the comparison with an emulator run (compare.py).
Pure-Python process management: nothing here imports Spark."""
