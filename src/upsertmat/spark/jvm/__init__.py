"""The pipeline's Java side: helpers compiled on first use with the JDK's ``javac``
(:mod:`.jars`: the compile and its cache) and the Hadoop local file system that sets file
permissions by system call (:mod:`.localfs`); their sources are in ``java/``."""
