// What a Java consumer of MirrorMaker 2 does to fail over: translate a group's offsets with
// MM2's client library. Run with the single-file source launcher against jars/mm2:
//   java -cp 'jars/mm2/*' tests/pipelines/mm2/TranslateOffsets.java BOOTSTRAP REMOTE_ALIAS GROUP
// BOOTSTRAP: the cluster holding <REMOTE_ALIAS>.checkpoints.internal (the flow's target).
// Prints one "topic<TAB>partition<TAB>offset" line per translated partition, sorted.
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: TranslateOffsets BOOTSTRAP REMOTE_ALIAS GROUP");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> translated =
            RemoteClusterUtils.translateOffsets(props, args[1], args[2], Duration.ofSeconds(60));
        Map<String, Long> sorted = new TreeMap<>();
        translated.forEach((tp, om) ->
            sorted.put(tp.topic() + "\t" + tp.partition(), om.offset()));
        sorted.forEach((k, v) -> System.out.println(k + "\t" + v));
    }
}
